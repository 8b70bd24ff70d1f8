"""Grandbo where agents work: the MCP server (`grandbo mcp`) over the local store or a
deployed API. The recall hook, which agents import, is `grandbo.api.recall`."""
