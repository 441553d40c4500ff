"""Builders and matchers for the ops fusion_compiler creates or recognises."""
