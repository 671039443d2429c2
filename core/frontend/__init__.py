"""The two entries: `dynamo` (torch.compile's backend) and `export` (`polyduct.compile` of a
torch.export program), with the frontend options they build (`options`, read by the pipeline),
their loud argument and plugin-load checks (`entry_checks`) and eager's refusal of overlapping
in-place writes (`overlap`). Both hand each graph to `polyduct.pipeline`."""
