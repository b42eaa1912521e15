"""zkctl"""
