"""The conversation log and what is read from it: turns stored masked, the Unanswered inbox, analytics, suggested
phrasings and popular entries. Below the turn (bot.chat), which records into it."""
