"""`specsight explore`: the browser explorer (docs/explore.md).

settings.py: the controls' values as scenario overrides, the URL and the YAML; views.py: the
closed-form pictures (speedup against batch, K and alpha; the round timeline; the accepted length;
capacity and cost); sim_jobs.py: the simulated study on demand, through the point store;
figures.py: plotly figures; app.py: the Dash app and its server.
"""
