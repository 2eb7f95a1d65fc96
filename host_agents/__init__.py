"""host_agents"""
