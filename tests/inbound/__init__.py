"""Bounces, complaints and provider events coming back, and garbage that must not get in."""
