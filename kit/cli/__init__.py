"""The thin CLI: each command parses options, calls one library function, prints."""
