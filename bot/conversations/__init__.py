"""The conversation log and what is read from it: recording turns (masked), the Unanswered inbox, analytics,
suggested phrasings and popular entries. Below the turn (bot.chat), above the result types it stores."""
