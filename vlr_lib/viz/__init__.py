"""Plotly figure builders: pure functions from numbers to `go.Figure`.

One module per topic (matrix, triplet, contrastive, unified, softmax, smooth_ap,
goal, cocos, training). Widgets in vlr_lib.widgets only wire controls to these
functions; the tests run each builder over grids of control values, because CI
only ever executes a notebook's default slider positions.
"""
