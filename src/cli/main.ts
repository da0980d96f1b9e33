console.log('waypoint: not yet');
