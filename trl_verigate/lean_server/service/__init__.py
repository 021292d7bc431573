"""Verification as a service: the in-process `LeanServer`, its HTTP front end and the `LeanClient` of remote ones."""
