"""What the memory derives from its entries' text: the embedding jobs, the blue/green
model switch, the vector cutoff measured on an organization's lake, and the consolidation
of recurrences found when an entry is embedded."""
