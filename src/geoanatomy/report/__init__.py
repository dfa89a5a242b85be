"""Reports generated from finished results, for the docs: the study's findings from
verdict.csv (``findings``), a grid's per-run tables (``grid``), two verdicts compared word by
word (``compare``), and the cost table of a config (``cost``). ``geoanatomy report ...``
runs them; each is a function returning markdown or text, tested on hand-made inputs."""
