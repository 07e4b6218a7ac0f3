"""The Bedrock-to-endpoint migration (issue 54): the comparison store, the ramp and the policies to use them."""
