; cpp
