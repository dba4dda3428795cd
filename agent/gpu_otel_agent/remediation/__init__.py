"""Handing a sick node to remediation: Node Problem Detector's custom-plugin protocol."""
