"""One tool call, from the model's request to its result, as a short ordered pipeline.

resolve → bind → pre-tool hooks → authorize → checkpoint → execute → post-tool hooks
(:class:`~caliban.calls.pipeline.CallPipeline`), over two typed values:

- :class:`~caliban.calls.effects.Effects`: what the call reads, writes, runs and reaches,
  computed once when it is bound;
- :data:`~caliban.calls.verdict.Verdict`: ``Allow | AllowWith | Deny | Ask``, what the
  authorize stage (and a hook) says about it.

The agent loop runs the calls of a response concurrently and hands each to the pipeline; the
pipeline never imports the loop, and the permission policy reaches it only through the
:class:`~caliban.calls.verdict.Authorizer` it is given. Import the modules themselves: this
package imports nothing, so a tool can use :mod:`caliban.calls.effects` without the rest.
"""
