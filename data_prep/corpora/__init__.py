"""Real text and labelled data fetched into the cache: samples for the demo, tests, benchmarks and experiments."""
