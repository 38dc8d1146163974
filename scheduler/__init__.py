"""Scheduled jobs: the daily/weekly session split and the memory sweep."""
