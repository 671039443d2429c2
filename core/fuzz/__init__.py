"""`polyduct fuzz`: random valid programs compiled by polyduct and compared with eager.

`generate` draws a program, `check_program` compares its compiled results with eager's,
`shrink` reduces a failing program, and `runner` runs a seeded campaign in worker processes.
"""
