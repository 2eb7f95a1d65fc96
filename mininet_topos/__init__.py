"""mininet_topos"""
