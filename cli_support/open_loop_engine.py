"""placeholder: replaced by the lead's version"""
