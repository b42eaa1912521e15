"""zkdata"""
