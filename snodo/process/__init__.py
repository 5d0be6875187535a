"""Child processes: started in their own group, bounded, confined by a policy, killed as a group."""
