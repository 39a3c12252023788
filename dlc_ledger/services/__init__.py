"""Use cases the CLI and the API both call: plain arguments in, plain results out."""
