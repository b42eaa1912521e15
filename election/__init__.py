"""election"""
