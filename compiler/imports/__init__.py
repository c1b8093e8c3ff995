"""The `import` language: compiler logs made elsewhere (TORCH_TRACE, TritonParse, XLA dumps), shown as stages."""
