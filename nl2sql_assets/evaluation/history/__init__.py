"""History: the committed benchmark records, the pages made from them, and the warehouse of runs."""
