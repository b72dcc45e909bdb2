"""Parallel strategies that run inside each worker rank."""
