; java
