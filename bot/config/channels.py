"""Settings of the IM channels: the WeCom (企业微信) self-built app's callback (docs/wecom.md). Secrets (the callback
token, the EncodingAESKey, the app secret) are named here by environment variable and read only from there."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bot.config.secrets import env_secret


class WeComSettings(BaseModel):
    """The WeCom self-built app channel: its callback URL, its credentials' variables, the reply budget. Off by default."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    # The callback path ("接收消息服务器配置 → URL" is https://your-host + this path).
    path: str = "/wecom/callback"
    # 我的企业 → 企业信息 → 企业ID (the receiveid of every encrypted message) and 应用管理 → the app → AgentId.
    corp_id: str = ""
    agent_id: int = Field(default=0, ge=0)
    # Environment variables holding the callback Token, the 43-character EncodingAESKey and the app's Secret.
    token_env: str = "KBBOT_WECOM_TOKEN"
    aes_key_env: str = "KBBOT_WECOM_AES_KEY"
    secret_env: str = "KBBOT_WECOM_SECRET"
    # WeCom waits 5 s for the callback's answer: an answer ready within this budget is the passive reply, a slower
    # one is sent afterwards through the send API (0 = always through the send API).
    reply_budget_seconds: float = Field(default=4.0, ge=0, le=4.5)
    # The send API's base URL (tests point it at a local stand-in); its timeout, attempts and retry wait.
    api_base: str = "https://qyapi.weixin.qq.com"
    send_timeout_seconds: float = Field(default=10.0, gt=0, le=60)
    send_attempts: int = Field(default=3, ge=1, le=10)
    send_retry_seconds: float = Field(default=1.0, ge=0, le=60)  # the wait before a retry, doubled after each
    # A callback whose timestamp is further than this from now is refused as a replay.
    max_clock_skew_seconds: int = Field(default=300, ge=10)
    # WeCom sends no history: the last messages of each user are kept in memory (a reply "2" to a clarify question).
    history_messages: int = Field(default=6, ge=0, le=40)
    history_ttl_seconds: int = Field(default=1800, ge=0)
    max_users: int = Field(default=10_000, ge=1)
    # List the entries an answer came from under it.
    show_sources: bool = False

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not re.fullmatch(r"(/[A-Za-z0-9._~-]+)+", value):
            raise ValueError(f"the callback path looks like /wecom/callback (no trailing slash); got {value!r}")
        return value

    @field_validator("api_base")
    @classmethod
    def _api_base(cls, value: str) -> str:
        if not re.fullmatch(r"https?://[^/\s]+(/[^\s]*)?", value):
            raise ValueError(f"api_base looks like https://qyapi.weixin.qq.com; got {value!r}")
        return value.rstrip("/")

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
