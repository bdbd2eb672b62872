"""Pure tests of TCD's switch side (netstack.tcd): detector, parameters, markers, control."""
