"""Lowering: an aten FX graph -> `polyduct.ir` (the `lower` pass of `polyduct.pipeline`).

`graph` holds the driver (`GraphLowering`, `LoweringContext`, `Fallback`), `table` the core's
lowering table built from one module per op family (`pointwise`, `views`, `reduce`, `scan`,
`index`, `scatter`, `scatter_reduce`, `pool`, `random`, `matmul`, `misc`), `decompositions` the
table handed to AOTAutograd. The rest are the driver's helpers: `values` (what lowerings share),
`sizes`, `externs`, `devices`, `fx_nodes`, `output_views`.
"""
