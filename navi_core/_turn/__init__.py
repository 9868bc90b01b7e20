"""One turn's private machinery: phases, control, extras, steering, approvals."""
