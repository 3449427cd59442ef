"""Export and import of a team's whole memory, as JSON Lines (admin scope).

The export is streamed (teams.streaming): read through server-side cursors in a
transaction of its own bound to the team, redacted of the vault's secrets line by line.
The import reads a body of at most MAX_REQUEST_BODY_BYTES and applies it through the
write pipeline (memories.writes.importing)."""

from __future__ import annotations

from typing import Any, ClassVar

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response

from core.api_errors import BODY_ERRORS, TEAM_SCOPED_ERRORS, ErrorSerializer, RequestTooLarge, error_responses
from core.errors import InvalidInput
from memories import exporting, writes
from teams.authentication import agent_actor
from teams.models import AuditEvent
from teams.scope import viewer_of
from teams.services import record_event
from teams.streaming import JSON_LINES_MEDIA_TYPE, TeamScopedStream, team_json_lines
from teams.vault_crypto import PassphraseSeal
from teams.viewsets import TEAM_PATH_PARAMETER, TeamScopedViewSet


class JSONLinesParser(BaseParser):
    """The raw body, bounded like every body; lines are parsed one by one later, so a
    bad line is reported with its number instead of refusing the whole body."""

    media_type = JSON_LINES_MEDIA_TYPE

    def parse(
        self, stream: Any, media_type: str | None = None, parser_context: Any = None
    ) -> dict[str, bytes]:
        limit = settings.MAX_REQUEST_BODY_BYTES
        raw: bytes = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise RequestTooLarge(f"request body is larger than {limit} bytes")
        return {"body": raw}


class NDJSONParser(JSONLinesParser):
    media_type = "application/x-ndjson"


# A header, not a query parameter: query strings end up in access logs.
PASSPHRASE_HEADER = "X-MemoryHub-Vault-Passphrase"  # noqa: S105 (a header name)
PASSPHRASE_PARAMETER = OpenApiParameter(
    PASSPHRASE_HEADER,
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description="The passphrase the file's vault is (or is to be) sealed under, 12 to 1024 characters.",
)


def _passphrase(request: Request) -> str | None:
    passphrase = request.headers.get(PASSPHRASE_HEADER)
    return passphrase if passphrase else None


class ExportQuerySerializer(serializers.Serializer[dict[str, Any]]):
    with_vault = serializers.BooleanField(
        default=False,
        help_text=f"Include the vault, every value sealed under the passphrase sent in {PASSPHRASE_HEADER}.",
    )


class ExportViewSet(TeamScopedViewSet):
    required_scopes: ClassVar[dict[str, str]] = {"list": "admin"}

    @extend_schema(
        summary="Export the team",
        description="The team's whole memory as JSON Lines, streamed: a header "
        f"(`format` `{exporting.EXPORT_FORMAT}`, `version` {exporting.EXPORT_VERSION}), every version "
        "of every key with every field it has (oldest first per key: its supersede chain, deletion "
        "or archive, times, votes, reads, anchor, skill and learning), every note, every "
        'confirmation, and a trailer `{"record": "end", ...}` with the counts: a file '
        "without it was cut short. Imported into an empty team, it reproduces the team. The vault is "
        "never exported; its secrets are redacted from every line. With `with_vault` and a passphrase "
        "in the `X-MemoryHub-Vault-Passphrase` header, every vault entry follows the confirmations "
        '(`{"record": "vault", ...}`), its value sealed under the passphrase '
        "(scrypt and Fernet; the header's `vault` says how to open it). Every export is in the team's "
        "audit trail. Needs the admin scope.",
        parameters=[TEAM_PATH_PARAMETER, ExportQuerySerializer, PASSPHRASE_PARAMETER],
        responses={
            (200, JSON_LINES_MEDIA_TYPE): OpenApiResponse(OpenApiTypes.STR, description="JSON Lines."),
            **error_responses(*TEAM_SCOPED_ERRORS),
        },
    )
    def list(self, request: Request, team: str) -> TeamScopedStream:
        query = ExportQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        owner = self.get_team()
        seal = None
        if query.validated_data["with_vault"]:
            passphrase = _passphrase(request)
            if passphrase is None:
                raise InvalidInput(f"with_vault needs a passphrase in the {PASSPHRASE_HEADER} header")
            try:
                seal = PassphraseSeal.new(passphrase)
            except ValueError as exc:
                raise InvalidInput(str(exc), field=PASSPHRASE_HEADER) from None
        record_event(
            team=owner,
            actor=agent_actor(request),
            action=AuditEvent.Action.TEAM_EXPORT,
            target="with the vault, sealed" if seal is not None else "",
        )
        return team_json_lines(
            team_id=owner.id,
            viewer=viewer_of(getattr(request.auth, "user_id", None)),
            produce=lambda: exporting.export_records(team=owner, vault_seal=seal),
        )


class ImportQuerySerializer(serializers.Serializer[dict[str, Any]]):
    skip_existing = serializers.BooleanField(
        default=False, help_text="Leave keys the team already has as they are, instead of superseding them."
    )
    dry_run = serializers.BooleanField(default=False, help_text="Report what would change; change nothing.")
    strict = serializers.BooleanField(
        default=False, help_text="Refuse the whole file, applying nothing, when any line is bad."
    )


class ImportLineErrorSerializer(serializers.Serializer[dict[str, Any]]):
    line = serializers.IntegerField(help_text="The line's number in the file, the header being line 1.")
    error = serializers.CharField()
    detail = serializers.CharField()


class ImportReportSerializer(serializers.Serializer[dict[str, Any]]):
    dry_run = serializers.BooleanField()
    created = serializers.IntegerField(help_text="Keys new to the team, with their whole history.")
    superseded = serializers.IntegerField(help_text='Keys whose entry the file replaced (reason "imported").')
    unchanged = serializers.IntegerField(help_text="Keys that already held what the file says.")
    skipped = serializers.IntegerField(
        help_text="Keys left as they were (`skip_existing`, or deleted in the file)."
    )
    versions_written = serializers.IntegerField()
    notes_written = serializers.IntegerField()
    vault = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Vault entries of the file: `created`, `replaced`, `unchanged`, `skipped` (left as they "
        "were, or not opened: no passphrase was sent).",
    )
    facts = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Facts of the file, by entity and key: `created`, `superseded`, `unchanged`, `skipped`, "
        "and `versions_written`.",
    )
    conversations = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Conversations of the file: `created`, and `unchanged` (the team has it already).",
    )
    # Moved off the class by the serializer's metaclass, as ErrorSerializer's `fields`.
    errors = ImportLineErrorSerializer(many=True, help_text="Bad lines, skipped.")  # type: ignore[assignment]
    keys = serializers.DictField(child=serializers.CharField(), help_text="What happened to each key.")


class ImportRefusedSerializer(ErrorSerializer):
    lines = ImportLineErrorSerializer(many=True, required=False)


class ImportViewSet(TeamScopedViewSet):
    required_scopes: ClassVar[dict[str, str]] = {"create": "admin"}
    parser_classes = [JSONLinesParser, NDJSONParser]

    @extend_schema(
        summary="Import an export file",
        description="Apply a file of `GET export/` to this team, through the same writes as every save "
        "(scrubbed of credentials; indexed later by the workers). A key the team never had gets its "
        'whole history; a key it has is superseded by the file\'s last version with the reason "imported" '
        "(or left alone with `skip_existing`); a key that already holds what the file says is unchanged, "
        "so importing the same file twice changes nothing. Every version written is this token's "
        "(`updated_by`, `deleted_by`, `archived_by`); the file's team, authors and `created_at` are kept "
        "in the version's `metadata.imported_from`. Bad lines are reported with their number and "
        "skipped, or with `strict` the whole file is refused (400 `import_refused`, `lines`) and nothing "
        "is applied. `dry_run` reports what would change. A file exported `with_vault` restores the vault "
        "when its passphrase is sent in `X-MemoryHub-Vault-Passphrase` (a wrong one refuses the file "
        "before anything is applied); without it the vault entries are skipped. Every import that "
        "is not a dry run is in the team's audit trail. Needs the admin scope.",
        parameters=[TEAM_PATH_PARAMETER, ImportQuerySerializer, PASSPHRASE_PARAMETER],
        request={JSON_LINES_MEDIA_TYPE: OpenApiTypes.STR},
        responses={
            200: ImportReportSerializer,
            **error_responses(*TEAM_SCOPED_ERRORS, *BODY_ERRORS),
            400: OpenApiResponse(
                ImportRefusedSerializer,
                description="`invalid`: the body is not an export file (no header of a known version). "
                "`import_refused`: a strict import had bad lines (`lines`); nothing was applied.",
            ),
        },
    )
    def create(self, request: Request, team: str) -> Response:
        query = ImportQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        raw = request.data.get("body") if isinstance(request.data, dict) else None
        if not isinstance(raw, bytes) or not raw.strip():
            raise InvalidInput("send the export file as the body", field="body")
        report = writes.import_export(
            team=self.get_team(),
            raw=raw,
            actor=agent_actor(request),
            vault_passphrase=_passphrase(request),
            **query.validated_data,
        )
        return Response(report.as_dict())
