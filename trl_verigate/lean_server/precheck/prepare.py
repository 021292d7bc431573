"""`prepare`: what is sent to Lean for a request, or why it is refused before Lean runs.

A `ProofRequest`'s statement and header are trusted (the caller takes both from the dataset); its proof body is
held to the boundary of `rules`. A complete file (`str`, `FileRequest`) is untrusted throughout (`files`).
"""

from __future__ import annotations

from typing import Union

from trl_verigate.lean_server.core import FileRequest, ProofRequest, Request, VerificationResult
from trl_verigate.lean_server.precheck import files, rules
from trl_verigate.lean_server.precheck.layout import parse_proof
from trl_verigate.lean_server.precheck.policy import Policy
from trl_verigate.lean_server.precheck.prepared import (
    Prepared,
    assemble,
    declaration,
    located_at,
    trusted_statement_tokens,
)
from trl_verigate.lean_server.precheck.scopes import bound_names, read_scopes, signature_binders
from trl_verigate.lean_server.precheck.tokens import PrecheckError, Token, check_characters, tokenize


def prepare(request: Request, default_header: str, policy: Policy) -> Union[Prepared, VerificationResult]:
    """The REPL command for `request`, or a `status="rejected"` result saying which rule refused what, and where.

    `default_header`: the trusted header of requests that name none (`LeanServerConfig.header`). `policy`: what a
    proof may contain (`policy.policy_for(config)`).
    """
    if not isinstance(default_header, str):
        raise TypeError(
            f"prepare(default_header=...) needs the header text as a str, got {type(default_header).__name__}"
        )
    try:
        if isinstance(request, ProofRequest):
            return _prepare_proof_request(request, default_header, policy)
        if isinstance(request, FileRequest):
            if not isinstance(request.file, str):
                raise TypeError(f"FileRequest.file must be a str, got {type(request.file).__name__}")
            return files.prepare_file(request.file, policy, default_header, request.statement, request.header)
        if isinstance(request, str):
            return files.prepare_file(request, policy, default_header)
    except PrecheckError as error:
        return VerificationResult(status="rejected", reason=error.reason(_submitted_source(request)))
    raise TypeError(
        f"prepare(request=...) needs a ProofRequest(statement, proof), a FileRequest or a str holding a Lean file, "
        f"got {type(request).__name__}"
    )


def _submitted_source(request: Request) -> str:
    """The text a PrecheckError's offset is relative to once shifted: the file, or the statement, a line break
    and the proof."""
    if isinstance(request, FileRequest):
        return request.file
    if isinstance(request, str):
        return request
    return request.statement + "\n" + request.proof


def check_proof_body(proof: str, policy: Policy, start_column: int, statement_tokens: list[Token]) -> list:
    """Hold an untrusted proof body (the text after `:= by`) to the boundary; returns its outermost tactics."""
    if not proof.strip():
        raise PrecheckError("empty proof body")
    check_characters(proof, "proof")
    tokens = tokenize(proof, start_column)
    layout = parse_proof(tokens)
    trace_heads = rules.check_tactics(layout, policy)
    trusted_names = frozenset(bound_names(statement_tokens, signature=True))
    scopes = read_scopes(layout, policy.bindable, frozenset(signature_binders(statement_tokens)))
    rules.check_code(tokens, policy, scopes, trusted_names=trusted_names, trace_heads=trace_heads)
    rules.check_local_definitions(layout)
    rules.check_extent(layout, proof)
    return layout.outermost_tactics(proof)


def _prepare_proof_request(request: ProofRequest, default_header: str, policy: Policy) -> Prepared:
    for field_name in ("statement", "proof"):
        if not isinstance(getattr(request, field_name), str):
            raise TypeError(
                f"ProofRequest.{field_name} must be a str, got {type(getattr(request, field_name)).__name__}"
            )
    header = default_header if request.header is None else request.header
    if not isinstance(header, str):
        raise TypeError(f"ProofRequest.header must be a str or None, got {type(header).__name__}")
    trusted = files.TrustedHeader.parse(header)
    tokens = trusted_statement_tokens(request.statement)
    keyword, name = declaration(tokens, "statement")
    with located_at(len(request.statement) + 1):
        tactics = check_proof_body(request.proof, policy, 0, tokens)
    prepared = assemble(
        trusted.imports,
        request.statement,
        "\n",
        request.proof,
        tokens,
        keyword,
        name,
        line_offset=0,
        preamble=trusted.preamble,
        trusted_preamble=trusted.preamble,
    )
    prepared.outermost_tactics = tactics
    return prepared
