"""What the IM channels (WeCom, Feishu) share: an Answer as plain text, each conversation's short memory and the
events already taken (in this process, or in the database the replicas share), and the delivery of a message
through the platform's send API (an access token cached until it expires, attempts with a timeout and back-off).

Each channel (``bot.api.wecom``, ``bot.api.feishu``) keeps only its protocol: signatures, crypto, payloads, routes.
"""
