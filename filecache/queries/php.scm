; php
