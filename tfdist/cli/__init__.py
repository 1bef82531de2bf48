"""The `tfdist` command and the absl flags shared by every entry point."""
