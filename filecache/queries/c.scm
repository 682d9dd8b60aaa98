; c
