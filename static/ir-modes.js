/* CodeMirror modes for the IRs users paste: MLIR (TTIR, TTGIR, StableHLO) and XLA HLO. */
CodeMirror.defineSimpleMode("mlir", {
  start: [
    {regex: /\/\/.*/, token: "comment"},
    {regex: /"(?:[^\\"]|\\.)*"/, token: "string"},
    {regex: /%[\w.$:#-]+/, token: "variable-2"},
    {regex: /@[\w.$-]+/, token: "def"},
    {regex: /#[\w.$-]+/, token: "atom"},
    {regex: /\^[\w.$-]+/, token: "tag"},
    {regex: /[a-z_]\w*\.[\w.]+/, token: "builtin"},
    {regex: /\b(?:tensor|memref|vector|i1|i8|i16|i32|i64|f16|bf16|f32|f64|index)\b/, token: "type"},
    {regex: /-?\d+(?:\.\d+)?(?:e[-+]?\d+)?/i, token: "number"},
    {regex: /->|=|:/, token: "operator"}
  ]
});
CodeMirror.defineSimpleMode("hlo", {
  start: [
    {regex: /\/\/.*/, token: "comment"},
    {regex: /\/\*/, token: "comment", next: "comment"},
    {regex: /"(?:[^\\"]|\\.)*"/, token: "string"},
    {regex: /\b(?:HloModule|ENTRY|ROOT)\b/, token: "keyword"},
    {regex: /\b(?:pred|s8|s16|s32|s64|u8|u32|u64|bf16|f16|f32|f64|c64|token)(?=\[)/, token: "type"},
    {regex: /\b(?:sharding|metadata|replica_groups|to_apply|dimensions|channel_id)\b/, token: "attribute"},
    {regex: /%[\w.-]+/, token: "variable-2"},
    {regex: /-?\d+(?:\.\d+)?(?:e[-+]?\d+)?/i, token: "number"}
  ],
  comment: [{regex: /.*?\*\//, token: "comment", next: "start"}, {regex: /.*/, token: "comment"}]
});
