"""The hand-off to a person: requests spotted in messages, tickets in the log's database, business hours, the
agents' passwords, staff notices through a persistent outbox, and the desk that ties them together for the ladder
and the front ends. Below the turn (bot.chat) and the front ends, above the conversation log it stores into."""
