"""Pygments lexers for the IRs pygments does not know: MLIR (TTIR, TTGIR, StableHLO) and XLA HLO.

Display only: they colour tokens, they do not parse.
"""
from pygments.lexer import RegexLexer, bygroups
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Text, Whitespace


class MlirLexer(RegexLexer):
    name = "MLIR"
    aliases = ["mlir"]
    tokens = {
        "root": [
            (r"\s+", Whitespace),
            (r"//.*?$", Comment.Single),
            (r'"(\\\\|\\"|[^"])*"', String),
            (r"%[\w.$:#-]+", Name.Variable),
            (r"\^[\w.$-]+", Name.Label),
            (r"@[\w.$-]+", Name.Function),
            (r"#[\w.$-]+", Name.Constant),
            (r"!?[a-z_][\w]*\.[\w.]+", Name.Builtin),  # dialect.op
            (r"\b(loc|func|module|return|attributes|to|step|iter_args|dense)\b", Keyword),
            (r"\b(tensor|memref|vector|ptr|i1|i8|i16|i32|i64|f16|bf16|f32|f64|index)\b", Keyword.Type),
            (r"-?\d+(\.\d+)?([eE][-+]?\d+)?", Number),
            (r"->|=|:", Operator),
            (r"[(){}\[\]<>,]", Punctuation),
            (r"\w+", Text),
            (r".", Text),
        ]
    }


class HloLexer(RegexLexer):
    name = "HLO"
    aliases = ["hlo"]
    tokens = {
        "root": [
            (r"\s+", Whitespace),
            (r"/\*.*?\*/", Comment.Multiline),
            (r"//.*?$", Comment.Single),
            (r'"(\\\\|\\"|[^"])*"', String),
            (r"\b(HloModule|ENTRY|ROOT)\b", Keyword),
            (r"(%?[\w.-]+)(\s*=\s*)", bygroups(Name.Variable, Operator)),
            (r"\b(pred|s4|s8|s16|s32|s64|u8|u16|u32|u64|f8e4m3fn|f8e5m2|bf16|f16|f32|f64|c64|c128|token)"
             r"(?=\[|\s|\))", Keyword.Type),
            (r"\b(sharding|metadata|replica_groups|channel_id|to_apply|calls|dimensions|"
             r"backend_config|frontend_attributes|op_name|source_file|source_line)\b", Name.Attribute),
            (r"%[\w.-]+", Name.Variable),
            (r"-?\d+(\.\d+)?([eE][-+]?\d+)?", Number),
            (r"=|->", Operator),
            (r"[(){}\[\]<>,:]", Punctuation),
            (r"[a-z][\w-]*(?=\()", Name.Function),
            (r"\w+", Text),
            (r".", Text),
        ]
    }
