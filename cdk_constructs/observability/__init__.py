"""What operators watch: the endpoint's metrics, alarms, the alarm topic and the SLO dashboard."""
