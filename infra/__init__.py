"""CDK (Python) infrastructure of Grandbo: one stack per stage, composed of constructs."""
