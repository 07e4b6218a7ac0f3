"""Developer and CI tools: synth summary, template diff, config reference, nag report."""
