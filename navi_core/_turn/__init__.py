"""One turn's private machinery: the phase machine, control, extras, steering."""
