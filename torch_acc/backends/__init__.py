"""Reference backends built on torch_acc's public API."""
