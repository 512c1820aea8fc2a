"""The catch-up runner and the read view through which every caller reads what it derived."""
