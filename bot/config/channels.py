"""Settings of the IM channels: the WeCom (企业微信) self-built app's callback (docs/wecom.md) and the Feishu (飞书)
app's event subscription (docs/feishu.md). Secrets (callback tokens, encryption keys, app credentials) are named
here by environment variable and read only from there.

What every channel has (its callback path, the send API's attempts, the replay window, each user's short memory)
is one base block, :class:`IMChannelSettings`; a channel adds its credentials' variables and its own limits.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from bot.config.base import Strict
from bot.config.secrets import env_secret


class IMChannelSettings(Strict):
    """What every IM channel has: its callback URL and send API, the replay window, the users' short memory."""

    enabled: bool = False
    """Answer the platform's callbacks at ``path``."""
    path: str = "/im/callback"
    """The callback path (https://your-host + this path is the URL the platform calls)."""
    api_base: str = "https://example.invalid"
    """The send API's base URL (tests point it at a local stand-in)."""
    send_timeout_seconds: float = Field(default=10.0, gt=0, le=60)
    """Seconds a send API request may take."""
    send_attempts: int = Field(default=3, ge=1, le=10)
    """Attempts to deliver an answer through the send API."""
    send_retry_seconds: float = Field(default=1.0, ge=0, le=60)
    """The wait before a retry, doubled after each."""
    max_clock_skew_seconds: int = Field(default=300, ge=10)
    """A callback whose timestamp is further than this from now is refused as a replay."""
    history_messages: int = Field(default=6, ge=0, le=40)
    """The platform sends no history: the last messages of each user are kept (a reply "2" to a clarify question), in
    memory or, with ``limits.backend: postgres``, in the database the replicas share."""
    history_ttl_seconds: int = Field(default=1800, ge=0)
    """A user's kept messages are forgotten after this many seconds without a message."""
    max_users: int = Field(default=10_000, ge=1)
    """Users whose messages are kept at once (the least recent are forgotten first)."""
    show_sources: bool = False
    """List the entries an answer came from under it."""

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not re.fullmatch(r"(/[A-Za-z0-9._~-]+)+", value):
            example = cls.model_fields["path"].default
            raise ValueError(f"the callback path looks like {example} (no trailing slash); got {value!r}")
        return value

    @field_validator("api_base")
    @classmethod
    def _api_base(cls, value: str) -> str:
        if not re.fullmatch(r"https?://[^/\s]+(/[^\s]*)?", value):
            raise ValueError(f"api_base looks like {cls.model_fields['api_base'].default}; got {value!r}")
        return value.rstrip("/")


class WeComSettings(IMChannelSettings):
    """The WeCom self-built app channel: its callback URL, its credentials' variables, the reply budget. Off by default."""

    enabled: bool = False
    """Answer WeCom callbacks at ``path`` (needs corp_id, agent_id and the three secrets in the environment)."""
    path: str = "/wecom/callback"
    """The callback path ("接收消息服务器配置 → URL" is https://your-host + this path)."""
    api_base: str = "https://qyapi.weixin.qq.com"
    """The send API's base URL (tests point it at a local stand-in)."""
    corp_id: str = ""
    """我的企业 → 企业信息 → 企业ID: the receiveid of every encrypted message."""
    agent_id: int = Field(default=0, ge=0)
    """应用管理 → the app → AgentId."""
    token_env: str = "KBBOT_WECOM_TOKEN"
    """The environment variable holding the callback Token."""
    aes_key_env: str = "KBBOT_WECOM_AES_KEY"
    """The environment variable holding the 43-character EncodingAESKey."""
    secret_env: str = "KBBOT_WECOM_SECRET"
    """The environment variable holding the app's Secret (for the send API)."""
    reply_budget_seconds: float = Field(default=4.0, ge=0, le=4.5)
    """WeCom waits 5 s: an answer ready within this is the passive reply, a slower one is sent afterwards through
    the send API (0 = always through the send API)."""

    @model_validator(mode="after")
    def _complete(self) -> WeComSettings:
        if self.enabled and not (self.corp_id and self.agent_id):
            raise ValueError("wecom.enabled needs corp_id (我的企业 → 企业ID) and agent_id (the app's AgentId)")
        return self

    def token(self) -> str:
        """The callback Token from the environment ("" when unset)."""
        return env_secret(self.token_env)

    def aes_key(self) -> str:
        """The EncodingAESKey from the environment ("" when unset)."""
        return env_secret(self.aes_key_env)

    def secret(self) -> str:
        """The app's Secret (for the send API) from the environment ("" when unset)."""
        return env_secret(self.secret_env)


class FeishuSettings(IMChannelSettings):
    """The Feishu (飞书 / Lark) app channel: its event subscription URL, its credentials' variables. Off by default."""

    enabled: bool = False
    """Answer Feishu events at ``path`` (needs the four variables below set in the environment)."""
    path: str = "/feishu/events"
    """The event subscription path ("事件与回调 → 请求地址" is https://your-host + this path)."""
    api_base: str = "https://open.feishu.cn"
    """The open platform's base URL: https://open.feishu.cn (Feishu) or https://open.larksuite.com (Lark)."""
    app_id_env: str = "KBBOT_FEISHU_APP_ID"
    """The environment variable holding the app's App ID (凭证与基础信息 → App ID, cli_...)."""
    app_secret_env: str = "KBBOT_FEISHU_APP_SECRET"
    """The environment variable holding the app's App Secret (for the tenant_access_token of the IM API)."""
    verification_token_env: str = "KBBOT_FEISHU_VERIFICATION_TOKEN"
    """The environment variable holding the event subscription's Verification Token (事件与回调 → 加密策略)."""
    encrypt_key_env: str = "KBBOT_FEISHU_ENCRYPT_KEY"
    """The environment variable holding the Encrypt Key (事件与回调 → 加密策略): events are signed and encrypted with
    it; the channel refuses every event until it is set."""
    remember_events_seconds: int = Field(default=43_200, ge=3_600)
    """Event ids already taken are kept this long (Feishu retries an event it got no 200 for after 5 s, 5 min, 1 h
    and 6 h): a retry or a replay is answered once, also after a restart (a file in the state folder, or with
    ``limits.backend: postgres`` the database the replicas share)."""

    def app_id(self) -> str:
        """The App ID from the environment ("" when unset)."""
        return env_secret(self.app_id_env)

    def app_secret(self) -> str:
        """The App Secret from the environment ("" when unset)."""
        return env_secret(self.app_secret_env)

    def verification_token(self) -> str:
        """The Verification Token from the environment ("" when unset)."""
        return env_secret(self.verification_token_env)

    def encrypt_key(self) -> str:
        """The Encrypt Key from the environment ("" when unset)."""
        return env_secret(self.encrypt_key_env)
