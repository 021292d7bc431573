"""The top layer: the `lean-*` command-line options and `trl-verigate lean-doctor`."""
