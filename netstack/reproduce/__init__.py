"""``netstack reproduce``: run each paper's experiments through the benches and write one report,
the paper's numbers beside ours with a computed verdict per claim (docs/reproduce.md).

- :mod:`.claims`: the model (paper, figure, claim, verdict);
- :mod:`.paperdata`: the papers' numbers, kept as data files with their source;
- :mod:`.runner`: runs the benches a paper needs, each into its own directory;
- :mod:`.report`: the HTML report (``index.html`` and one page per paper) and its JSON.

Each paper's module (``PAPER``) lives in its protocol's package and is found through the registry
(``netstack.protocols.reproduce_modules``).
"""
